package main

import (
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotCreate draws the cumulative distribution of each create path's
// latency (cold, warm, the floor, and the default type's) into a PNG.
func plotCreate(results []result, path string) error {
	p := plot.New()
	p.Title.Text = "Create → ready on the local stack (cumulative distribution)"
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = "fraction of creates at or below"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(8)
	p.Legend.YOffs = vg.Points(8)
	i := 0
	for _, r := range results {
		if r.name != "BenchmarkCreateReadyPool" && r.name != "BenchmarkCreateReady" {
			continue
		}
		for _, rec := range r.records {
			for _, s := range rec.Series {
				label := s.Name
				if r.name == "BenchmarkCreateReady" {
					label = "default type (tmux)"
				}
				line, err := plotter.NewLine(cdf(s.Samples))
				if err != nil {
					return fmt.Errorf("plot %s: %w", label, err)
				}
				line.StepStyle = plotter.PostStep
				line.Color = plotutil.Color(i)
				line.Width = vg.Points(2)
				line.Dashes = plotutil.Dashes(i)
				p.Add(line)
				p.Legend.Add(fmt.Sprintf("%s (n=%d)", label, len(s.Samples)), line)
				i++
			}
		}
	}
	if i == 0 {
		return fmt.Errorf("plot: no create series")
	}
	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.TextStyle.XAlign = draw.XLeft
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// cdf returns the empirical distribution of samples: the i-th smallest at
// the fraction of samples at or below it, starting from zero at the smallest.
func cdf(samples []float64) plotter.XYs {
	sorted := slices.Sorted(slices.Values(samples))
	xys := make(plotter.XYs, 0, len(sorted)+1)
	xys = append(xys, plotter.XY{X: sorted[0], Y: 0})
	for i, v := range sorted {
		xys = append(xys, plotter.XY{X: v, Y: float64(i+1) / float64(len(sorted))})
	}
	return xys
}
