module fashion_mnist

go 1.19

require kx v0.0.0

replace kx => ../../../bindings/go
