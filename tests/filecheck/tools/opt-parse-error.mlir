// A malformed file gets the parse diagnostic with line:column and a non-zero exit, no traceback.
// RUN: not deplodock-opt %s 2>&1 | filecheck %s

func.func @f(%a: f32) -> f32 {
  %x = arith.mulf %a %a : f32
  func.return %x : f32
}

// CHECK: deplodock-opt: error: {{.*}}opt-parse-error.mlir:5:
// CHECK-NOT: Traceback
