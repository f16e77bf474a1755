// The RateLimit fields as Structured Fields (RFC 9651), against the structured-headers package as the oracle:
// the same bytes as its serializer, and its parser reads back what was meant.
import fc from 'fast-check'
import { parseList, serializeList } from 'structured-headers'
import t from 'tap'
import { policyField, serviceField } from '../../lib/rate-limit/fields.js'
import { RATE_LIMIT_MAX } from '../../lib/policy/file-schema.js'
import type { Policy } from '../../lib/policy/policy.js'
import { runs } from '../helpers/fuzz.js'
import { policy } from '../helpers/fixtures.js'

const limited = (entity: string, payments: number, seconds: number): Policy =>
  policy({ entity, rateLimit: { payments, seconds } })

/** The one Item of a field, as the oracle reads it: its value and its parameters. */
function readItem(field: string): { value: unknown; params: Record<string, unknown> } {
  const list = parseList(field)
  if (list.length !== 1) throw new Error(`${list.length} members in ${field}`)
  const [value, params] = list[0] as [unknown, Map<string, unknown>]
  return { value, params: Object.fromEntries(params) }
}

const pk = (entity: string) => Buffer.from(entity, 'utf8')

t.test("the contract's examples, with the entity as the partition key", async (t) => {
  const shop = limited('shop-1', 100, 60)
  const limit = shop.rateLimit as NonNullable<Policy['rateLimit']>
  t.equal(policyField(shop, limit), '"payments";q=100;w=60;pk=:c2hvcC0x:')
  t.equal(serviceField(shop, limit, 0, 7), '"payments";r=0;t=7;pk=:c2hvcC0x:')
  t.equal(policyField(shop, limit), policyField(shop, limit), 'made once per policy')
})

t.test('every field is what the oracle serializes, and reads back as meant, whatever the entity', async (t) => {
  fc.assert(
    fc.property(
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: RATE_LIMIT_MAX.payments }),
      fc.integer({ min: 1, max: RATE_LIMIT_MAX.seconds }),
      fc.integer({ min: 0, max: RATE_LIMIT_MAX.payments }),
      fc.integer({ min: 1, max: RATE_LIMIT_MAX.seconds }),
      (entity, payments, seconds, remaining, reset) => {
        const compiled = limited(entity, payments, seconds)
        const limit = compiled.rateLimit as NonNullable<Policy['rateLimit']>
        const ours = policyField(compiled, limit)
        const service = serviceField(compiled, limit, remaining, reset)
        const key = pk(entity)
        const expected = serializeList([
          [
            'payments',
            new Map<string, unknown>([
              ['q', payments],
              ['w', seconds],
              ['pk', key],
            ]) as never,
          ],
        ])
        const expectedService = serializeList([
          [
            'payments',
            new Map<string, unknown>([
              ['r', remaining],
              ['t', reset],
              ['pk', key],
            ]) as never,
          ],
        ])
        if (ours !== expected || service !== expectedService) return false
        const read = readItem(ours)
        const readService = readItem(service)
        return (
          read.value === 'payments' &&
          read.params.q === payments &&
          read.params.w === seconds &&
          Buffer.from(read.params.pk as ArrayBuffer).equals(key) &&
          readService.params.r === remaining &&
          readService.params.t === reset &&
          Buffer.from(readService.params.pk as ArrayBuffer).toString('utf8') === entity
        )
      },
    ),
    runs(),
  )
})
