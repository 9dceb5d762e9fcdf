package awsconfig

import (
	"fmt"
	"io"
	"strings"

	"github.com/aws/smithy-go/logging"
)

// sdkLogger passes the SDK's log lines on, except one false alarm: the DynamoDB
// client checks every response body against its X-Amz-Crc32 header and, when the
// header is absent (DynamoDB error responses, DynamoDB Local), against 0, then warns
// that the body "did not match expected checksum, 0, …" on close
// (aws/aws-sdk-go-v2#3545). Only that case, expected checksum 0, is dropped; a real
// mismatch against a header the server sent is still logged.
type sdkLogger struct {
	next logging.Logger
}

func newSDKLogger(w io.Writer) logging.Logger {
	return sdkLogger{next: logging.NewStandardLogger(w)}
}

func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	if c == logging.Warn && strings.Contains(fmt.Sprintf(format, v...), "did not match expected checksum, 0, ") {
		return
	}
	l.next.Logf(c, format, v...)
}
