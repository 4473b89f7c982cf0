// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 48 {
    }
  }
  tile.return
}
// CHECK: tile.threads: thread count 48 must be a multiple of 32 and at most 1024

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 2048 {
    }
  }
  tile.return
}
// CHECK: tile.threads: thread count 2048 must be a multiple of 32 and at most 1024

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 0 {
  }
  tile.return
}
// CHECK: tile.grid: the count must be positive, got 0

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.threads %t to 32 {
  }
  tile.return
}
// CHECK: 'tile.threads' expects parent op 'tile.grid'

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
  }
  tile.grid %c to 1 {
  }
  tile.return
}
// CHECK: tile.kernel @k: expected exactly one tile.grid directly in the body, found 2

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.return
}
// CHECK: tile.kernel @k: expected exactly one tile.grid directly in the body, found 0

// -----

tile.kernel @k(%x: f32) {
  tile.grid %b to 1 {
  }
  tile.return
}
// CHECK: tile.kernel @k: argument #0 must be a memref, got f32

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    %c0 = arith.constant 0 : index
    %v = tile.load %x[%c0] : memref<64xf32>
    %r = tile.combine add %v : f32
  }
  tile.return
}
// CHECK: 'tile.combine' expects ancestor op 'tile.threads'

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 32 {
      %c0 = arith.constant 0 : index
      %v = tile.load %x[%c0, %c0] : memref<64xf32>
    }
  }
  tile.return
}
// CHECK: tile.load: expected 1 indices for memref<64xf32>, got 2

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 32 {
      %c0 = arith.constant 0 : index
      %v = tile.load %x[%c0] : memref<64xf32>
      tile.store %v, %x[] : memref<64xf32>
    }
  }
  tile.return
}
// CHECK: tile.store: expected 1 indices for memref<64xf32>, got 0

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 32 {
      tile.for %i = %t to 64 step 0 {
      }
    }
  }
  tile.return
}
// CHECK: tile.for: step must be positive, got 0

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 32 {
      %z = arith.constant 0.0 : f32
      %c = arith.constant 0 : index
      %s = tile.for %i = %t to 64 step 32 iter_args(%a = %z) -> (f32) {
        tile.yield %c : index
      }
    }
  }
  tile.return
}
// CHECK: tile.for: yield types (index) differ from iter_args types (f32)

// -----

tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
  }
  tile.return
}
func.func @forward(%x: memref<32xf32>) {
  tile.launch @k(%x) : (memref<32xf32>) -> ()
  func.return
}
// CHECK: tile.launch: argument types of @k differ: kernel takes (memref<64xf32>), launch passes (memref<32xf32>)

// -----

func.func @forward(%x: memref<32xf32>) {
  tile.launch @forward(%x) : (memref<32xf32>) -> ()
  func.return
}
// CHECK: tile.launch: @forward is a func.func, not a kernel

// -----

// 64, 32 and 4 KiB slabs: more shared memory than a block may opt in to (99 KiB).
tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 32 {
      %s0 = tile.shared_alloc : memref<16384xf32, 3 : i64>
      %s1 = tile.shared_alloc : memref<8192xf32, 3 : i64>
      %s2 = tile.shared_alloc : memref<1024xf32, 3 : i64>
    }
  }
  tile.return
}
// CHECK: tile.kernel @k: 102400 bytes of shared memory per block, more than the 101376 a block may have

// -----

// A copy that is never committed lands at no defined time.
tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 32 {
      %s = tile.shared_alloc : memref<64xf32, 3 : i64>
      tile.copy_async %s[%t], %x[%t], 4 : memref<64xf32, 3 : i64>, memref<64xf32>
    }
  }
  tile.return
}
// CHECK: tile.kernel @k: a tile.copy_async is not followed by a tile.async_commit

// -----

// Committed groups that no tile.async_wait ever waits for.
tile.kernel @k(%x: memref<64xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 32 {
      %s = tile.shared_alloc : memref<64xf32, 3 : i64>
      tile.copy_async %s[%t], %x[%t], 4 : memref<64xf32, 3 : i64>, memref<64xf32>
      tile.async_commit
    }
  }
  tile.return
}
// CHECK: tile.kernel @k: tile.async_commit groups are never waited for (no tile.async_wait)
