import t from 'tap'
import { INTERNAL_ERROR, SERVICE_UNAVAILABLE } from '../../lib/errors.js'
import { faultAnswer, retriesOf, serverErrorMessage } from '../../lib/proxy/faults.js'

t.test('a failure before the write is the plain 503; a path passed through gets the table 500', async (t) => {
  t.equal(faultAnswer('refused'), SERVICE_UNAVAILABLE)
  t.equal(faultAnswer('refused', 'replayed'), SERVICE_UNAVAILABLE, 'nothing was forwarded: "Retry later" is true')
  t.equal(faultAnswer('timeout'), INTERNAL_ERROR)
  t.equal(faultAnswer('reset'), INTERNAL_ERROR)
})

t.test(
  "a payment's timeout or reset: 500 internalErrorOccurred saying the outcome is unknown, and what a retry gets",
  async (t) => {
    for (const kind of ['timeout', 'reset'] as const) {
      const replayed = faultAnswer(kind, 'replayed')
      const forwarded = faultAnswer(kind, 'forwarded')
      for (const answer of [replayed, forwarded]) {
        t.equal(answer.status, 500, kind)
        t.equal(answer.body.errorName, 'internalErrorOccurred', kind)
        t.match(answer.body.message, /^The outcome of this payment is unknown: it was sent to the backend/, kind)
        t.match(answer.body.message, /Ask the backend for the payment's status/i, kind)
        t.notMatch(answer.body.message, /Retry later/, kind)
        t.ok(Object.isFrozen(answer), `${kind}: one value, built once`)
      }
      t.match(replayed.body.message, /retries with this transactionReference get this answer/, kind)
      t.notMatch(forwarded.body.message, /get this answer/, `${kind}: a retry is forwarded, and the words say so`)
      t.match(forwarded.body.message, /this gateway forwards a retry to the backend again/, kind)
      t.equal(faultAnswer(kind, 'replayed'), replayed, `${kind}: the same value each time`)
    }
    t.match(faultAnswer('timeout', 'replayed').body.message, /did not answer in time/)
    t.match(faultAnswer('reset', 'replayed').body.message, /the connection broke before its answer came/)
    t.match(
      serverErrorMessage('replayed'),
      /^The outcome of this payment is unknown: the backend answered it with a server error.*get this answer/,
    )
    t.match(serverErrorMessage('forwarded'), /forwards a retry to the backend again/)
  },
)

t.test("a payment's retries get its answer only under a claim", async (t) => {
  t.equal(retriesOf({ retryProtection: 'claimed' }), 'replayed')
  for (const retryProtection of [undefined, 'unprotected'] as const)
    t.equal(retriesOf({ retryProtection }), 'forwarded', `${retryProtection}: off, report mode, or failure open`)
})
