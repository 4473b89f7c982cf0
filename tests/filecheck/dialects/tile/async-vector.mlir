// RUN: deplodock-opt %s | filecheck %s
// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s -p convert-tile-to-kernel | filecheck %s --check-prefix=KERNEL

// The tile-level asynchronous copies and vector accesses round-trip, and lower one to one.

builtin.module {
  tile.kernel @stage(%x: memref<64x64xf32>, %y: memref<64x64xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %c4 = arith.constant 4 : index
        %s = tile.shared_alloc : memref<8x64xf32, 3 : i64>
        %col = arith.muli %t, %c4 : index
        %p = arith.cmpi ult, %t, %c4 : index
        tile.copy_async %s[%c0, %col], %x[%c0, %col], 16 : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
        tile.copy_async %s[%c4, %col], %x[%c4, %col], 8 if %p : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
        tile.async_commit
        tile.async_wait 0
        tile.barrier
        %a, %b1, %c, %d = tile.load_vector %s[%c0, %col] width 4 : memref<8x64xf32, 3 : i64>
        tile.store_vector %a, %b1, %c, %d, %y[%t, %col] : memref<64x64xf32>
      }
    }
    tile.return
  }
}

// CHECK:      tile.copy_async %s[%c0, %col], %x[%c0, %col], 16 : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
// CHECK-NEXT: tile.copy_async %s[%c4, %col], %x[%c4, %col], 8 if %p : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
// CHECK-NEXT: tile.async_commit
// CHECK-NEXT: tile.async_wait 0
// CHECK-NEXT: tile.barrier
// CHECK-NEXT: %a, %b1, %c, %d = tile.load_vector %s[%c0, %col] width 4 : memref<8x64xf32, 3 : i64>
// CHECK-NEXT: tile.store_vector %a, %b1, %c, %d, %y[%t, %col] : memref<64x64xf32>

// KERNEL:      kernel.cp_async %s[%c0, %col], %x[%c0, %col], 16 : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
// KERNEL-NEXT: kernel.cp_async %s[%c4, %col], %x[%c4, %col], 8 if %p : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
// KERNEL-NEXT: kernel.cp_async_commit
// KERNEL-NEXT: kernel.cp_async_wait 0
// KERNEL-NEXT: kernel.barrier
// KERNEL-NEXT: %a, %b1, %c, %d = kernel.load_vector %s[%c0, %col] width 4 : memref<8x64xf32, 3 : i64>
// KERNEL-NEXT: kernel.store_vector %a, %b1, %c, %d, %y[%t, %col] : memref<64x64xf32>
