package dialects

import (
	"fmt"
	"sync"
	"testing"
)

func TestLockNames(t *testing.T) {
	t.Run("remembers a name added, forgets on Forget", func(t *testing.T) {
		var n LockNames
		if n.known("a") {
			t.Fatal("a name never added is known")
		}
		n.add("a")
		if !n.known("a") || n.known("b") {
			t.Fatal("after add(a): known(a) must be true, known(b) false")
		}
		n.Forget()
		if n.known("a") {
			t.Fatal("known after Forget")
		}
	})
	t.Run("nil remembers nothing", func(t *testing.T) {
		var n *LockNames
		n.add("a")
		n.Forget()
		if n.known("a") {
			t.Fatal("a nil LockNames knows a name")
		}
	})
	t.Run("bounded", func(t *testing.T) {
		var n LockNames
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range lockNamesMax {
					n.add(fmt.Sprintf("%d-%d", w, i))
				}
			}()
		}
		wg.Wait()
		size := 0
		n.seen.Range(func(_, _ any) bool { size++; return true })
		if size > lockNamesMax+8 {
			t.Fatalf("%d names remembered, max %d", size, lockNamesMax)
		}
	})
}
