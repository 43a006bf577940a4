module example.com/dlock/zkstore

go 1.26.8

replace example.com/dlock => ..

require (
	example.com/dlock v0.0.0
	github.com/go-zookeeper/zk v1.0.4
	go.uber.org/goleak v1.3.0
)
