import { Readable } from 'node:stream'
import t from 'tap'
import { ABORTED, readBody } from '../../lib/http/read-body.js'

/** A stream that is not node's request: it emits `error` whether anyone listens or not, as `Readable.fromWeb`'s does. */
function body(...chunks: string[]): Readable {
  const stream = new Readable({ read: () => undefined })
  for (const chunk of chunks) stream.push(Buffer.from(chunk))
  return stream
}

t.test('a body read whole, in one chunk or several', async (t) => {
  const one = body('{"a":1}')
  one.push(null)
  t.same(await readBody(one, 64), Buffer.from('{"a":1}'))
  const several = body('{"a"', ':1}')
  several.push(null)
  t.same(await readBody(several, 64), Buffer.from('{"a":1}'))
})

t.test('past the limit: 413, and the unread rest may still fail without ending the process', async (t) => {
  const stream = body('z'.repeat(65))
  t.match(await readBody(stream, 64), { status: 413, body: { errorName: 'bodyIsTooLarge' } })
  // The client resets the connection whose body was left unread: red before, an uncaught error.
  stream.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }))
  await new Promise((resolve) => stream.once('close', resolve))
  t.ok(stream.destroyed)
})

t.test('a body that fails or closes before its end is ABORTED; one destroyed before the read too', async (t) => {
  const failing = body('{"a"')
  const failed = readBody(failing, 64)
  failing.destroy(new Error('reset'))
  t.equal(await failed, ABORTED)
  const closing = body('{"a"')
  const closed = readBody(closing, 64)
  closing.destroy()
  t.equal(await closed, ABORTED)
  t.equal(await readBody(closing, 64), ABORTED)
})
