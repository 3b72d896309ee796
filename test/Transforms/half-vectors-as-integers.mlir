// RUN: fff-opt %s --fff-half-vectors-as-integers | FileCheck %s

// A bf16 tail's masked load: the same bits, moved as i16, pass-through
// included.
// CHECK-LABEL: llvm.func @bf16_tail_load
// CHECK:         %[[ZERO:.*]] = llvm.bitcast %arg2 : vector<8xbf16> to vector<8xi16>
// CHECK:         %[[BITS:.*]] = llvm.intr.masked.load %arg0, %arg1, %[[ZERO]] {alignment = 2 : i32} : (!llvm.ptr, vector<8xi1>, vector<8xi16>) -> vector<8xi16>
// CHECK:         %[[V:.*]] = llvm.bitcast %[[BITS]] : vector<8xi16> to vector<8xbf16>
// CHECK:         llvm.return %[[V]]
llvm.func @bf16_tail_load(%p: !llvm.ptr, %m: vector<8xi1>, %zero: vector<8xbf16>) -> vector<8xbf16> {
  %v = llvm.intr.masked.load %p, %m, %zero {alignment = 2 : i32} : (!llvm.ptr, vector<8xi1>, vector<8xbf16>) -> vector<8xbf16>
  llvm.return %v : vector<8xbf16>
}

// An f16 tail's masked load without pass-through, and its store: the
// bitcasts between them fold away.
// CHECK-LABEL: llvm.func @f16_tail
// CHECK:         %[[BITS:.*]] = llvm.intr.masked.load %arg0, %arg1 {alignment = 2 : i32} : (!llvm.ptr, vector<16xi1>) -> vector<16xi16>
// CHECK-NEXT:    llvm.intr.masked.store %[[BITS]], %arg0, %arg1 {alignment = 2 : i32} : vector<16xi16>, vector<16xi1> into !llvm.ptr
llvm.func @f16_tail(%p: !llvm.ptr, %m: vector<16xi1>) {
  %v = llvm.intr.masked.load %p, %m {alignment = 2 : i32} : (!llvm.ptr, vector<16xi1>) -> vector<16xf16>
  llvm.intr.masked.store %v, %p, %m {alignment = 2 : i32} : vector<16xf16>, vector<16xi1> into !llvm.ptr
  llvm.return
}

// f32 stays as it is.
// CHECK-LABEL: llvm.func @f32_tail
// CHECK-NOT:     llvm.bitcast
// CHECK:         llvm.intr.masked.load %arg0, %arg1 {alignment = 4 : i32} : (!llvm.ptr, vector<8xi1>) -> vector<8xf32>
llvm.func @f32_tail(%p: !llvm.ptr, %m: vector<8xi1>) -> vector<8xf32> {
  %v = llvm.intr.masked.load %p, %m {alignment = 4 : i32} : (!llvm.ptr, vector<8xi1>) -> vector<8xf32>
  llvm.return %v : vector<8xf32>
}

// Whole vectors too: a bf16 rounding's NaN select (arith-expand's, on i16,
// then bitcast to bf16) stays a select of i16 once its result is stored
// as i16 (the two bitcasts fold away), where LLVM would otherwise make it a
// select of bf16. A load keeps its attributes, a streaming store its
// nontemporal flag.
// CHECK-LABEL: llvm.func @bf16_rounding_stored
// CHECK:         %[[BITS:.*]] = llvm.load %arg0 {alignment = 16 : i64} : !llvm.ptr -> vector<8xi16>
// CHECK:         %[[V:.*]] = llvm.bitcast %[[BITS]] : vector<8xi16> to vector<8xbf16>
// CHECK:         %[[SELECTED:.*]] = llvm.select %arg1, %{{.*}}, %{{.*}} : vector<8xi1>, vector<8xi16>
// CHECK-NEXT:    llvm.store %[[SELECTED]], %arg0 {alignment = 16 : i64, nontemporal} : vector<8xi16>, !llvm.ptr
// CHECK:         llvm.return %[[V]]
llvm.func @bf16_rounding_stored(%p: !llvm.ptr, %nan: vector<8xi1>, %bits: vector<8xi16>) -> vector<8xbf16> {
  %v = llvm.load %p {alignment = 16 : i64} : !llvm.ptr -> vector<8xbf16>
  %q = llvm.mlir.constant(dense<32704> : vector<8xi16>) : vector<8xi16>
  %s = llvm.select %nan, %q, %bits : vector<8xi1>, vector<8xi16>
  %r = llvm.bitcast %s : vector<8xi16> to vector<8xbf16>
  llvm.store %r, %p {alignment = 16 : i64, nontemporal} : vector<8xbf16>, !llvm.ptr
  llvm.return %v : vector<8xbf16>
}

// Scalars stay as they are.
// CHECK-LABEL: llvm.func @scalar
// CHECK-NOT:     llvm.bitcast
llvm.func @scalar(%p: !llvm.ptr, %v: bf16) {
  llvm.store %v, %p : bf16, !llvm.ptr
  llvm.return
}
