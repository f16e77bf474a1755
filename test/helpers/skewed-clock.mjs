// A process whose wall clock is off by TEST_CLOCK_SKEW_MS (`--import` it): Date.now() and new Date() say so, as on a
// machine whose clock drifted. The monotonic clock (performance.now()) has no wall time to skew.
const skew = Number(process.env.TEST_CLOCK_SKEW_MS ?? 0)
const RealDate = globalThis.Date
const realNow = RealDate.now
class SkewedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(realNow() + skew)
    else super(...args)
  }

  static now() {
    return realNow() + skew
  }
}
globalThis.Date = SkewedDate
