// RUN: fff-opt %s --fff-masked-half-as-integers | FileCheck %s

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
