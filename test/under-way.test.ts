import t from 'tap'
import { UnderWay } from '../lib/under-way.js'

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
