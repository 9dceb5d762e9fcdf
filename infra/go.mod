module github.com/remote-agents/remote-agents/infra

go 1.26.0
