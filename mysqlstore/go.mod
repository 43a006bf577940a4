module example.com/dlock/mysqlstore

go 1.26.8

replace example.com/dlock => ..

require (
	example.com/dlock v0.0.0
	github.com/go-sql-driver/mysql v1.10.1
)

require filippo.io/edwards25519 v1.2.0 // indirect
