import fc from 'fast-check'
import t from 'tap'
import { PaymentsInFlight, UnderWay, type CallInFlight } from '../../lib/proxy/payments-in-flight.js'
import { runs } from '../helpers/fuzz.js'

/** A call that leaves `list` when cut, as a relay does (payment-relay.ts, finish), and says whether its client left. */
function call(list: PaymentsInFlight, cuts: string[], name: string, left: boolean): CallInFlight {
  const it: CallInFlight = {
    inFlightSlot: -1,
    cut() {
      cuts.push(name)
      list.delete(it)
      return left ? name : undefined
    },
  }
  return it
}

t.test(
  'calls leave from any place, each once; cut reaches each call left once, and settled waits for the last',
  async (t) => {
    const list = new PaymentsInFlight()
    const cuts: string[] = []
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => call(list, cuts, name, name !== 'c')) as CallInFlight[]
    for (const each of [a, b, c, d]) list.add(each as CallInFlight)
    let settled = false
    void list.settled().then(() => (settled = true))
    // The middle one, then the last: the last of the list takes the place of the first that leaves.
    list.delete(b as CallInFlight)
    list.delete(d as CallInFlight)
    t.equal(b?.inFlightSlot, -1, 'a call that left holds no place')
    // Settled twice (withdrawn, then its error), or never added: nothing changes.
    list.delete(b as CallInFlight)
    list.delete(call(list, cuts, 'never added', true))
    await Promise.resolve()
    t.notOk(settled, 'two calls are left')
    t.same(list.cut().sort(), ['a'], 'the ids of the cut calls whose clients had left')
    t.same(cuts.sort(), ['a', 'c'], 'each call left cut once, none that had left')
    await list.settled()
    t.ok(settled, 'settled once the last left')
    t.same(list.cut(), [], 'nothing left to cut')
  },
)

t.test('calls in and out in any order: cut reaches exactly those a Set of them still holds', async (t) => {
  // Few calls and long runs, so that each is added, moved and taken out many times over.
  const step = fc.record({ call: fc.nat({ max: 5 }), out: fc.boolean() })
  fc.assert(
    fc.property(fc.array(step, { maxLength: 200, size: 'max' }), (steps) => {
      const list = new PaymentsInFlight()
      const cuts: string[] = []
      const calls = Array.from({ length: 6 }, (_, i) => call(list, cuts, String(i), true))
      // The oracle: a Set, which the list replaced (docs/performance-history.md, the fifteenth session).
      const held = new Set<number>()
      for (const { call: i, out } of steps) {
        // A call is added while out of the list (a relay, once, at its dispatch), and may settle more than once.
        if (out) {
          list.delete(calls[i] as CallInFlight)
          held.delete(i)
        } else if (!held.has(i)) {
          list.add(calls[i] as CallInFlight)
          held.add(i)
        }
      }
      const expected = [...held].map(String).sort()
      if (JSON.stringify(list.cut().sort()) !== JSON.stringify(expected)) return false
      return JSON.stringify(cuts.sort()) === JSON.stringify(expected)
    }),
    runs(),
  )
  t.pass('the list agreed with the Set after every run')
})

t.test('UnderWay resolves every wait once none is left, and at once when none is', async (t) => {
  const underWay = new UnderWay()
  await underWay.settled()
  underWay.enter()
  underWay.enter()
  let waits = 0
  const first = underWay.settled().then(() => waits++)
  const second = underWay.settled().then(() => waits++)
  underWay.leave()
  await Promise.resolve()
  t.equal(waits, 0, 'one is still under way')
  underWay.leave()
  await Promise.all([first, second])
  t.equal(waits, 2)
})
