import t from 'tap'
import { BoundedBody } from '../../lib/proxy/bounded-body.js'

t.test('a body in one chunk is that chunk, not a copy', async (t) => {
  const chunk = Buffer.from('{"outcome":"authorized"}')
  const body = new BoundedBody(64)
  body.add(chunk)
  t.equal(body.bytes(), chunk)
})

t.test('a body in several chunks is joined; an empty one is empty', async (t) => {
  const body = new BoundedBody(64)
  body.add(Buffer.from('ab'))
  body.add(Buffer.from('cd'))
  t.same(body.bytes(), Buffer.from('abcd'))
  t.equal(new BoundedBody(64).bytes()?.length, 0)
})

t.test('past the limit nothing is kept, whichever chunk crossed it', async (t) => {
  const body = new BoundedBody(3)
  body.add(Buffer.from('ab'))
  t.same(body.bytes(), Buffer.from('ab'))
  t.notOk(body.over)
  body.add(Buffer.from('cd'))
  t.equal(body.bytes(), undefined)
  t.ok(body.over)
  const single = new BoundedBody(3)
  single.add(Buffer.from('abcd'))
  t.equal(single.bytes(), undefined)
})
