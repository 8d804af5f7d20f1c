//go:build !(linux && (amd64 || arm64))

package sockab

func startUring(int) (Server, error) { return nil, ErrNotSupported }
