package session_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/apierror"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func code(err error) apierror.Code { return apierror.CodeOf(err) }
