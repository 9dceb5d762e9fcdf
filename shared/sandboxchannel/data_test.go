package sandboxchannel

import (
	"strings"
	"testing"
)

func TestStorableNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    string
		want bool
	}{
		{"0", true}, {"-0.0", true}, {"1", true}, {"-1.5", true}, {"1E+5", true},
		{"9.99e125", true}, {"1e126", false}, {"-1e126", false}, {"12e124", true}, {"100e124", false},
		{"1e-130", true}, {"1e-131", false}, {"0.0001", true}, {"0.00012e-126", true}, {"0.00012e-127", false},
		{strings.Repeat("7", 38), true}, {strings.Repeat("7", 39), false},
		{"1" + strings.Repeat("0", 100), true}, {"1" + strings.Repeat("0", 126), false},
		{"0." + strings.Repeat("7", 39), false}, {"1e99999", false},
	}
	for _, tt := range tests {
		if got := storableNumber(tt.n); got != tt.want {
			t.Errorf("storableNumber(%.50s) = %v, want %v", tt.n, got, tt.want)
		}
	}
}
