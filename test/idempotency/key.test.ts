import t from 'tap'
import { idempotencyKey } from '../../lib/idempotency/key.js'

t.test('idempotencyKey: the entity and the transactionReference, as a JSON pair', async (t) => {
  t.equal(idempotencyKey('default', 'order-1'), '["default","order-1"]')
  t.equal(JSON.parse(idempotencyKey('a"b', 'c\\d')).join('|'), 'a"b|c\\d')
})

t.test('idempotencyKey: no two pairs spell one key, whatever characters they hold', async (t) => {
  const pairs: [string, string][] = [
    ['a', 'b:c'],
    ['a:b', 'c'],
    ['a', '","b'],
    ['a","', 'b'],
    ['', 'ab'],
    ['ab', ''],
  ]
  const keys = pairs.map(([entity, reference]) => idempotencyKey(entity, reference))
  t.equal(new Set(keys).size, pairs.length)
})
