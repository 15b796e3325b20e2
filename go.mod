module github.com/kiln-dev/kiln

go 1.23

require github.com/cespare/xxhash/v2 v2.3.0 // indirect
