// Package zkstore is a dlock store on ZooKeeper (driver.Mutex on the session
// model) with the node layout of Apache Curator's InterProcessMutex, so
// that dlock clients and Curator services exclude each other and wait in
// one queue.
//
// The long form is docs/zookeeper.md in the repository.
package zkstore
