import t from 'tap'
import { requestIdOf } from '../../lib/http/request-id.js'

t.test('a sane X-Request-Id is kept as the client sent it', async (t) => {
  for (const id of [
    'a',
    '0b3c9a2e-4f1d-4e8a-9c1b-7d2e5f6a8b9c',
    'Root=1-67891233-abcdef012345678912345678',
    'a/b+c=',
    '!#$%&*+-./:=?@^_|~',
    'x'.repeat(128),
  ]) {
    t.equal(requestIdOf(id), id, id)
  }
})

t.test('an id that would break a header list or a log line, or is too long, is replaced by a new one', async (t) => {
  for (const id of [
    '',
    'x'.repeat(129),
    'a b',
    'a, b',
    'a"b',
    "a'b",
    'a\\b',
    'a;b',
    '(a)',
    '<a>',
    '[a]',
    '{a}',
    'a`b',
    'caf\u00e9',
    'a\tb',
  ]) {
    const replaced = requestIdOf(id)
    t.not(replaced, id, JSON.stringify(id))
    t.match(replaced, /^[\w-]{12}-[0-9a-z]+$/, 'a new id')
  }
  t.match(requestIdOf(['a', 'b']), /^[\w-]{12}-[0-9a-z]+$/, 'a header given twice')
})

t.test('new ids: none when there is no header, each one different, one prefix per process', async (t) => {
  const ids = Array.from({ length: 1000 }, () => requestIdOf(undefined))
  t.equal(new Set(ids).size, ids.length)
  t.equal(new Set(ids.map((id) => id.slice(0, 13))).size, 1)
  t.ok(
    ids.every((id) => requestIdOf(id) === id),
    'a new id is itself sane',
  )
})
