import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import fc from 'fast-check'
import { query } from 'jsonpath-rfc9535'
import t from 'tap'
import {
  compileBackendErrors,
  defaultName,
  loadBackendErrors,
  NO_RULES,
  parsePath,
  readBackendErrors,
  valueAt,
  type BackendErrorRules,
} from '../../lib/backend-errors/rules.js'
import { ERRORS } from '../../lib/errors.js'
import { runs } from '../helpers/fuzz.js'

function compiled(file: unknown): BackendErrorRules {
  const rules = compileBackendErrors(file)
  if (Array.isArray(rules)) throw new Error(rules.join('; '))
  return rules
}

t.test('JSONPaths of the simple form: dots, quoted keys, indexes', async (t) => {
  t.same(parsePath('$'), [])
  t.same(parsePath('$.code'), ['code'])
  t.same(parsePath("$.error['x-code'][2].detail"), ['error', 'x-code', 2, 'detail'])
  t.same(parsePath("$['it\\'s']"), ["it's"], 'an escaped quote')
  t.same(parsePath("$['caf\\u00e9']['a\\nb\\/\\\\']"), ['café', 'a\nb/\\'], "RFC 9535's escapes (2.3.1.1)")
  for (const bad of ["$['\\x']", "$['\\\"']", "$['a\nb']", "$['\\u00e']"])
    t.equal(parsePath(bad), undefined, `${bad} refused`)
  for (const bad of ['code', '$.', '$..code', '$[*]', '$.a b', "$['open"])
    t.equal(parsePath(bad), undefined, `${bad} refused`)
  const document = { error: { 'x-code': [0, 1, { detail: 'E1' }] }, n: null }
  t.equal(valueAt(document, ['error', 'x-code', 2, 'detail']), 'E1')
  t.equal(valueAt(document, ['n']), null)
  t.equal(valueAt(document, ['n', 'deeper']), undefined, 'through null')
  t.equal(valueAt(document, ['missing']), undefined)
  t.equal(valueAt(document, ['toString']), undefined, 'own keys only')
  t.equal(valueAt({ a: [1, 2] }, ['a', 'length']), undefined, 'a name selects no member of an array (RFC 9535 2.3.1.2)')
  t.equal(valueAt(['x'], ['0']), undefined)
  t.equal(valueAt({ 0: 'x' }, [0]), undefined, 'an index selects no member of an object (RFC 9535 2.3.3.2)')
  t.equal(valueAt('text', ['length']), undefined, 'not into a string')
  t.equal(valueAt(undefined, ['code']), undefined, 'no document')
})

t.test("a rule's JSONPath finds what an RFC 9535 JSONPath finds in the backend's body", async (t) => {
  const KEYS = ['a', 'b_1', '0', '1', 'length', 'x-y', "it's", 'c\nd', 'café', '\\', '"', '/', '😀', '']
  const { value } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.constantFrom(null, true, 1, 'E1'),
      fc.dictionary(fc.constantFrom(...KEYS), tie('value'), { maxKeys: 4 }),
      fc.array(tie('value'), { maxLength: 3 }),
    ),
  }))
  /** A character of a single-quoted name (RFC 9535 2.3.1.1), as it is where it may be, or escaped. */
  const spelt = (char: string, escape: boolean): string => {
    if (char === "'" || char === '\\') return `\\${char}`
    if (char === '\n') return escape ? '\\u000a' : '\\n'
    if (!escape) return char
    if (char === '/') return '\\/'
    // A character past U+FFFF as its surrogate pair, each unit escaped.
    return Array.from(char.split(''), (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')
  }
  const step = fc.oneof(
    fc
      .tuple(fc.constantFrom(...KEYS), fc.array(fc.boolean(), { maxLength: 4 }))
      .map(([key, escapes]) =>
        escapes.length === 0 && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)
          ? `.${key}`
          : `['${[...key].map((char, at) => spelt(char, escapes[at] ?? false)).join('')}']`,
      ),
    fc.nat({ max: 3 }).map((index) => `[${index}]`),
  )
  fc.assert(
    fc.property(value, fc.array(step, { maxLength: 3 }), (document, steps) => {
      const text = `$${steps.join('')}`
      const path = parsePath(text)
      // Where the oracle and the rules' reader both take the path: refusing it at load is the rules' choice.
      if (path === undefined) return true
      const found = query(document as never, text) as unknown[]
      return found.length <= 1 && valueAt(document, path) === found[0]
    }),
    runs(),
  )
})

t.test('the default names by status (docs/backend-faults.md)', async (t) => {
  const expected: [number, string][] = [
    [400, 'requestIsInvalid'],
    [401, 'accessDenied'],
    [403, 'accessDenied'],
    [404, 'resourceIsNotFound'],
    [405, 'methodIsNotAllowed'],
    [408, 'requestTimedOut'],
    [409, 'requestIsInConflict'],
    [410, 'requestIsRefused'],
    [413, 'bodyIsTooLarge'],
    [422, 'requestIsNotProcessable'],
    [429, 'requestRateIsTooHigh'],
    [451, 'requestIsRefused'],
    [500, 'internalErrorOccurred'],
    [502, 'internalErrorOccurred'],
    [503, 'serviceUnavailable'],
    [504, 'internalErrorOccurred'],
  ]
  for (const [status, name] of expected) t.equal(defaultName(status), name, `${status}: ${name}`)
  t.same(NO_RULES.rules, [])
})

t.test('a valid file compiles into frozen rules, in order, and lists the names they give', async (t) => {
  const rules = compiled({
    rules: [
      { status: 400, match: { '$.code': 'E_CURRENCY' }, errorName: 'currencyIsNotSupported' },
      {
        status: '4xx',
        match: { '$.error.kind': 'limit', '$.error.retry': true },
        errorName: 'cardLimitIsReached',
        message: 'The card limit is reached.',
      },
      { status: '5xx', errorName: 'cardLimitIsReached', message: 'another', messageFrom: '$.detail' },
      { status: 402, errorName: 'paymentIsDeclined', message: 'The payment was declined.' },
    ],
  })
  t.ok(Object.isFrozen(rules) && Object.isFrozen(rules.rules) && Object.isFrozen(rules.rules[0]))
  t.same(rules.rules[0], {
    from: 400,
    to: 400,
    match: [{ path: ['code'], value: 'E_CURRENCY' }],
    errorName: 'currencyIsNotSupported',
    message: ERRORS.currencyIsNotSupported.message,
    messageFrom: undefined,
  })
  t.match(rules.rules[1], {
    from: 400,
    to: 499,
    match: [
      { path: ['error', 'kind'], value: 'limit' },
      { path: ['error', 'retry'], value: true },
    ],
  })
  t.match(rules.rules[2], { from: 500, to: 599, match: [], message: 'another', messageFrom: ['detail'] })
  t.same(
    [...rules.names],
    [
      ['currencyIsNotSupported', { message: ERRORS.currencyIsNotSupported.message, statuses: ['400'] }],
      ['cardLimitIsReached', { message: 'The card limit is reached.', statuses: ['4XX', '5XX'] }],
      ['paymentIsDeclined', { message: 'The payment was declined.', statuses: ['402'] }],
    ],
  )
  t.same(compiled({ rules: [] }).rules, [], 'no rules at all')
})

t.test('an invalid file: every reason, with where it is', async (t) => {
  t.same(compileBackendErrors([]), ['$: must be an object whose only key is "rules", an array of rules'])
  t.same(compileBackendErrors({ rules: {} }), ['$: must be an object whose only key is "rules", an array of rules'])
  t.same(compileBackendErrors({ rules: [], more: 1 }), [
    '$: must be an object whose only key is "rules", an array of rules',
  ])
  const reasons = compileBackendErrors({
    rules: [
      'rule',
      { status: 399, errorName: 'requestIsInvalid', extra: 1 },
      { status: '3xx', errorName: 'Bad-Name' },
      { status: 400.5, errorName: 'fieldIsMissing' },
      { status: 400, match: [], errorName: 'newName' },
      { status: 400, match: { code: 'E', '$.a': { nested: 1 } }, errorName: 'requestIsInvalid', message: '' },
      { status: 400, errorName: 'requestIsInvalid', messageFrom: 'detail' },
      { status: 600, errorName: 3 },
    ],
  })
  t.same(reasons, [
    '$.rules[0]: must be an object',
    '$.rules[1].extra: is not a rule key (status, match, errorName, message, messageFrom)',
    '$.rules[1].status: must be a status from 400 to 599, "4xx" or "5xx"',
    '$.rules[2].status: must be a status from 400 to 599, "4xx" or "5xx"',
    '$.rules[2].errorName: must be an error name in lower camel case',
    '$.rules[3].status: must be a status from 400 to 599, "4xx" or "5xx"',
    '$.rules[3].errorName: "fieldIsMissing" is a field error name, not an answer\'s',
    '$.rules[4].match: must be an object of JSONPaths and values',
    '$.rules[4].message: "newName" is not in the error table, so the rule must give its message',
    '$.rules[5].match: "code" is not a JSONPath of the form $.a.b, $[\'a\'] or $.a[0]',
    '$.rules[5].match["$.a"]: must be a string, number, boolean or null',
    '$.rules[5].message: must be a non-empty string',
    "$.rules[6].messageFrom: must be a JSONPath of the form $.a.b, $['a'] or $.a[0]",
    '$.rules[7].status: must be a status from 400 to 599, "4xx" or "5xx"',
    '$.rules[7].errorName: must be an error name in lower camel case',
  ])
})

t.test(
  'files: read and compiled; not JSON or invalid is a reason; load throws EBACKENDERRORS with the file',
  async (t) => {
    const dir = t.testdir({
      'good.json': JSON.stringify({ rules: [{ status: 404, errorName: 'resourceIsNotFound' }] }),
      'text.json': '{ nope',
      'bad.json': '{"rules": [1]}',
      'twice.json': '{"rules": [], "rules": [{"status": 404, "errorName": "resourceIsNotFound"}]}',
    })
    const good = await loadBackendErrors(join(dir, 'good.json'))
    t.equal(good.rules.length, 1)
    t.match(await readBackendErrors(join(dir, 'text.json')), [/^not JSON: /])
    // Red before: one valid rule, the one a reader of the file does not see.
    t.same(await readBackendErrors(join(dir, 'twice.json')), [
      '$.rules: given twice in one object, where the gateway would read the last and a reader of the file the first; give it once',
    ])
    await t.rejects(loadBackendErrors(join(dir, 'bad.json')), {
      code: 'EBACKENDERRORS',
      message: `${join(dir, 'bad.json')}: $.rules[0]: must be an object`,
    })
    await t.rejects(
      loadBackendErrors(join(dir, 'missing.json')),
      { code: 'EBACKENDERRORS', message: `${join(dir, 'missing.json')}: no such file or folder` },
      'a file that cannot be read, in words',
    )
    await t.rejects(
      loadBackendErrors('/dev/zero'),
      { code: 'EBACKENDERRORS', message: '/dev/zero: a device, where a regular file is expected' },
      'a device is refused before it is read',
    )
    await writeFile(join(dir, 'empty.json'), '')
    await t.rejects(loadBackendErrors(join(dir, 'empty.json')), { code: 'EBACKENDERRORS', message: /not JSON/ })
  },
)
