package awsconfig

import (
	"bytes"
	"testing"

	"github.com/aws/smithy-go/logging"
)

func TestSDKLoggerDropsOnlyTheMissingHeaderChecksumWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		class  logging.Classification
		format string
		args   []any
		logged bool
	}{
		{"missing header", logging.Warn, "failed to close HTTP response body, this may affect connection reuse: %v",
			[]any{"response did not match expected checksum, 0, 2080965641"}, false},
		{"real mismatch", logging.Warn, "failed to close HTTP response body, this may affect connection reuse: %v",
			[]any{"response did not match expected checksum, 12345, 2080965641"}, true},
		{"other warning", logging.Warn, "retrying %s", []any{"PutItem"}, true},
		{"debug", logging.Debug, "response did not match expected checksum, 0, 1", nil, true},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		newSDKLogger(&buf).Logf(tt.class, tt.format, tt.args...)
		if got := buf.Len() > 0; got != tt.logged {
			t.Errorf("%s: logged = %v, want %v (%q)", tt.name, got, tt.logged, buf.String())
		}
	}
}
