// The MLIR-style pipeline wrapper and the IR dump after every pass.
// RUN: deplodock-opt %s --pass-pipeline='builtin.module(cse)' | filecheck %s
// RUN: deplodock-opt %s -p cse --mlir-print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=DUMP
// RUN: not deplodock-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=BAD

func.func @f(%a: f32) -> f32 {
  %x = arith.mulf %a, %a : f32
  %y = arith.mulf %a, %a : f32
  %z = arith.addf %x, %y : f32
  func.return %z : f32
}

// CHECK:      %x = arith.mulf %a, %a : f32
// CHECK-NEXT: %z = arith.addf %x, %x : f32

// DUMP: // -----// IR Dump After cse //----- //
// DUMP: arith.addf %x, %x

// BAD: deplodock-opt: error: unknown pass 'no-such-pass'; --list-passes lists them
