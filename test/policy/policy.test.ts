import t from 'tap'
import { compilePolicy, staticPolicies, type Policy } from '../../lib/policy/policy.js'

const file = {
  entity: 'default',
  currencies: ['GBP', 'EUR'],
  paymentInstruments: ['card/plain', 'card/token'],
  features: { dynamicMcc: true, paymentFacilitator: false, moto: true, debtRepayment: false },
  mcc: '5734',
  narrative: { line1: 'truncate' },
}

t.test('a valid file becomes a frozen policy with sets', async (t) => {
  const policy = compilePolicy(file) as Policy
  t.equal(policy.entity, 'default')
  t.ok(policy.currencies.has('EUR'))
  t.ok(policy.paymentInstruments.has('card/token'))
  t.same(policy.features, file.features)
  t.equal(policy.mcc, '5734')
  t.equal(policy.line1, 'truncate')
  t.ok(Object.isFrozen(policy))
  t.ok(Object.isFrozen(policy.features))
  t.same(compilePolicy({ ...file, features: { ...file.features, dynamicMcc: false }, mcc: undefined }), {
    ...(compilePolicy(file) as Policy),
    features: { ...file.features, dynamicMcc: false },
    mcc: undefined,
  })
})

t.test('a rate limit over any window whose milliseconds are a safe integer: a week, the longest', async (t) => {
  for (const seconds of [604_800, 9_007_199_254_740]) {
    const policy = compilePolicy({ ...file, rateLimit: { payments: 1_000_000, seconds } }) as Policy
    t.same(policy.rateLimit, { payments: 1_000_000, seconds }, `${seconds} s`)
  }
})

t.test('what is refused, one reason per problem', async (t) => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['not an object', [], /^\$: /],
    ['unknown top-level key', { ...file, colour: 'red' }, /^\$\.colour: /],
    ['unknown feature', { ...file, features: { ...file.features, refunds: true } }, /^\$\.features\.refunds: /],
    [
      'missing feature',
      { ...file, features: { dynamicMcc: true, paymentFacilitator: false, moto: true } },
      /^\$\.features\.debtRepayment: .*fieldIsMissing/,
    ],
    [
      'feature not boolean',
      { ...file, features: { ...file.features, moto: 'yes' } },
      /^\$\.features\.moto: .*fieldMustBeBoolean/,
    ],
    ['lower-case currency', { ...file, currencies: ['gbp'] }, /^\$\.currencies\[0\]: .*stringFailedRegexCheck/],
    ['empty instrument', { ...file, paymentInstruments: [''] }, /^\$\.paymentInstruments\[0\]: /],
    ['mcc not four digits', { ...file, mcc: '57340' }, /^\$\.mcc: .*stringFailedRegexCheck/],
    ['unknown line1 mode', { ...file, narrative: { line1: 'cut' } }, /^\$\.narrative\.line1: /],
    ['unknown narrative key', { ...file, narrative: { line1: 'reject', line2: 'reject' } }, /^\$\.narrative\.line2: /],
    ['empty entity', { ...file, entity: '' }, /^\$\.entity: .*fieldIsEmpty/],
    ['dynamicMcc without mcc', { ...file, mcc: undefined }, /^\$\.mcc: dynamicMcc is on/],
    [
      'rateLimit of 0 payments',
      { ...file, rateLimit: { payments: 0, seconds: 1 } },
      /^\$\.rateLimit\.payments: .*integerIsTooSmall/,
    ],
    [
      'rateLimit seconds a fraction',
      { ...file, rateLimit: { payments: 1, seconds: 0.5 } },
      /^\$\.rateLimit\.seconds: .*fieldMustBeInteger/,
    ],
    [
      'rateLimit over its bound',
      { ...file, rateLimit: { payments: 1_000_001, seconds: 1 } },
      /^\$\.rateLimit\.payments: .*integerIsTooLarge/,
    ],
    [
      'rateLimit a window whose milliseconds are no safe integer',
      { ...file, rateLimit: { payments: 1, seconds: 9_007_199_254_741 } },
      /^\$\.rateLimit\.seconds: The value must be a whole number of seconds from 1, below 2\^53 \/ 1000\. \(integerIsTooLarge\)$/,
    ],
    ['rateLimit without seconds', { ...file, rateLimit: { payments: 1 } }, /^\$\.rateLimit\.seconds: .*fieldIsMissing/],
    [
      'rateLimit with another key',
      { ...file, rateLimit: { payments: 1, seconds: 1, burst: 2 } },
      /^\$\.rateLimit\.burst: /,
    ],
  ]
  for (const [name, value, reason] of cases) {
    const refused = compilePolicy(value)
    t.ok(Array.isArray(refused), name)
    t.match((refused as string[])[0], reason, name)
  }
  const several = compilePolicy({ ...file, currencies: 'GBP', moto: true }) as string[]
  t.equal(several.length, 2, 'every problem is listed')
})

t.test('a rateLimit is kept frozen; without one there is none', async (t) => {
  const limited = compilePolicy({ ...file, rateLimit: { payments: 100, seconds: 60 } }) as Policy
  t.same(limited.rateLimit, { payments: 100, seconds: 60 })
  t.ok(Object.isFrozen(limited.rateLimit))
  t.equal((compilePolicy(file) as Policy).rateLimit, undefined)
})

t.test('staticPolicies looks a policy up by entity', async (t) => {
  const policy = compilePolicy(file) as Policy
  const other = compilePolicy({ ...file, entity: 'other' }) as Policy
  const source = staticPolicies([policy, other])
  t.equal(source.get('default'), policy)
  t.equal(source.get('other'), other)
  t.equal(source.get('nobody'), undefined)
})
