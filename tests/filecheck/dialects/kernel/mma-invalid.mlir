// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

// What one mma.sync cannot take: the wrong number of fragment registers per lane (f32
// inputs make it the tf32 m16n8k8: 4 A and 2 B values), an input type with no MMA, a
// correction on a 16-bit MMA.

kernel.func @three_b(%x: memref<64xbf16>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %z = arith.constant 0.000000e+00 : f32
  %a = kernel.load %x[%t] : memref<64xbf16>
  %d0, %d1, %d2, %d3 = kernel.mma_sync a(%a, %a, %a, %a, %a, %a, %a, %a) b(%a, %a, %a) c(%z, %z, %z, %z) : bf16
  kernel.return
}
// CHECK: kernel.mma_sync: m16n8k16 takes 8 A, 4 B and 4 C values per lane and gives 4, got 8, 3, 4 and 4

// -----

kernel.func @fp32_inputs(%x: memref<64xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %a = kernel.load %x[%t] : memref<64xf32>
  %d0, %d1, %d2, %d3 = kernel.mma_sync a(%a, %a, %a, %a, %a, %a, %a, %a) b(%a, %a, %a, %a) c(%a, %a, %a, %a) : f32
  kernel.return
}
// CHECK: kernel.mma_sync: m16n8k8 takes 4 A, 2 B and 4 C values per lane and gives 4, got 8, 4, 4 and 4

// -----

kernel.func @f64_inputs(%x: memref<64xf64>, %y: memref<64xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %a = kernel.load %x[%t] : memref<64xf64>
  %z = kernel.load %y[%t] : memref<64xf32>
  %d0, %d1, %d2, %d3 = kernel.mma_sync a(%a, %a, %a, %a, %a, %a, %a, %a) b(%a, %a, %a, %a) c(%z, %z, %z, %z) : f64
  kernel.return
}
// CHECK: kernel.mma_sync: A and B must both be bf16, both f16 or both f32 (tf32), got f64

// -----

kernel.func @bf16_correction(%x: memref<64xbf16>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %z = arith.constant 0.000000e+00 : f32
  %a = kernel.load %x[%t] : memref<64xbf16>
  %d0, %d1, %d2, %d3 = kernel.mma_sync a(%a, %a, %a, %a, %a, %a, %a, %a) b(%a, %a, %a, %a) c(%z, %z, %z, %z) {correction} : bf16
  kernel.return
}
// CHECK: kernel.mma_sync: only a tf32 MMA adds a correction
