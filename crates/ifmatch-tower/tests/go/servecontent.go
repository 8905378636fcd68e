// The reference implementation the layer is compared with: Go's net/http ServeContent serving
// one representation, with the same strong ETag (the SHA-256 tag the layer computes) and the
// same Last-Modified as the layer's app. Prints its address, then serves until killed.
//
// Usage: servecontent CONTENT UNIX_SECONDS
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	content := []byte(os.Args[1])
	seconds, err := strconv.ParseInt(os.Args[2], 10, 64)
	if err != nil {
		panic(err)
	}
	modtime := time.Unix(seconds, 0)
	sum := sha256.Sum256(content)
	tag := "\"" + hex.EncodeToString(sum[:]) + "\""
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(listener.Addr().String())
	handler := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", tag)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		http.ServeContent(w, r, "", modtime, bytes.NewReader(content))
	}
	panic(http.Serve(listener, http.HandlerFunc(handler)))
}
