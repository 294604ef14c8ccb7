module gatehouse.dev/hack/pause

go 1.26.0
