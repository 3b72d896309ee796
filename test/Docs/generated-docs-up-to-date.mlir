// The committed dialect and pass references must match what ODS generates; after
// editing the .td files, refresh it with `ninja -C build fff-doc`.
// RUN: diff -u %fff_src_root/docs/Dialect/FFFDialect.md %fff_obj_root/docs/Dialect/FFFDialect.md
// RUN: diff -u %fff_src_root/docs/Passes/FFFConversionPasses.md %fff_obj_root/docs/Passes/FFFConversionPasses.md
// RUN: diff -u %fff_src_root/docs/Passes/FFFTransformsPasses.md %fff_obj_root/docs/Passes/FFFTransformsPasses.md
// RUN: diff -u %fff_src_root/docs/Passes/FFFGenericPasses.md %fff_obj_root/docs/Passes/FFFGenericPasses.md
