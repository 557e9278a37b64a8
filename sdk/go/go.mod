module heddle.dev/bridge

go 1.22
