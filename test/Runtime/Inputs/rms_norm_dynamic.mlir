// An RMSNorm whose batch and scale length are dynamic: what an AOT entry
// point must check at run time.
func.func @rms_norm(%x: tensor<?x768xbf16>, %g: tensor<?xbf16>) -> tensor<?x768xbf16> {
  %y = fff.rms_norm %x scale(%g : tensor<?xbf16>) : tensor<?x768xbf16>
  return %y : tensor<?x768xbf16>
}
