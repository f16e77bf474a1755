import t from 'tap'
import { InFlight } from '../../lib/rate-limit/in-flight.js'

t.test('at most max places, each given back once taken', async (t) => {
  const cap = new InFlight(2)
  t.ok(cap.enter())
  t.ok(cap.enter())
  t.notOk(cap.enter(), 'full')
  t.equal(cap.count, 2)
  cap.leave()
  t.ok(cap.enter(), 'a place given back is taken again')
  t.equal(cap.max, 2)
})
