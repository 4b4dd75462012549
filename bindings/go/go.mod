module kx

go 1.19
