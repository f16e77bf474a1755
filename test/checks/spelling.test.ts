import fc from 'fast-check'
import t from 'tap'
import { MAX_DEPTH } from '../../lib/checks/body.js'
import { checkSpelling, membersIn, spelledOnce } from '../../lib/checks/spelling.js'
import { appendKey } from '../../lib/schema/json-path.js'
import { REQUEST_NAMES, type Names } from '../../lib/schema/names.js'
import { OPERATIONS } from '../../lib/schema/payment.js'
import { saleBody } from '../helpers/fixtures.js'
import { runs } from '../helpers/fuzz.js'
import { FOLDINGS, FOLDS_INTO, respell } from '../helpers/lenient.js'

/** What the body's walk gives the check: the members of the text's document (body.ts). */
const membersOf = (text: string, names = REQUEST_NAMES.sale) => membersIn(JSON.parse(text), names, false, MAX_DEPTH)
const check = (text: string, names = REQUEST_NAMES.sale) =>
  checkSpelling(text, Buffer.from(text), names, membersOf(text, names))
/** The screen of a clean body, on the sale's names. */
const once = (text: string) => spelledOnce(text, Buffer.from(text), membersOf(text))
/** The paths of the refused members, or undefined when the text passes. */
const refused = (text: string, names = REQUEST_NAMES.sale) =>
  check(text, names)?.body.validationErrors?.map((item) => {
    t.equal(item.errorName, 'fieldIsNotAllowed')
    return item.jsonPath
  })
const sale = JSON.stringify(saleBody())

t.test('a clean body, and members the schema does not name, pass', async (t) => {
  t.equal(check(sale), undefined)
  t.equal(check(' [1, "a", {"x": 1}] '), undefined, 'not an object: the schema answers')
  t.equal(check('"merchant"'), undefined)
  t.equal(check('{"merchant": "x", "Merchant2": 1, "extra": {"Entity": 1, "entity": 2}}'), undefined)
  const open = saleBody()
  open.instruction.paymentInstrument.billingAddress = { city: 'a', City: 'b' }
  open.customer = { authentication: { Type: 'x', type: 'y' } }
  t.equal(check(JSON.stringify(open)), undefined, 'open objects are left alone')
  t.equal(
    check('{"extra": {"a": 1, "a": 2}, "list": [{"b": 1, "b": 2}]}'),
    undefined,
    'a repeated member the schema does not name',
  )
  t.equal(
    check('{"merchant": {"entity": {"Entity": 1, "entity": 2}}}'),
    undefined,
    'below a member that holds no table',
  )
})

t.test('a sibling whose name folds to a named member is refused at its path', async (t) => {
  t.same(refused(sale.replace('{', '{"Merchant":{"entity":"marketplace"},')), ['$.Merchant'])
  t.same(refused(sale.replace('"entity":"default"', '"entity":"default","ENTITY":"marketplace"')), [
    '$.merchant.ENTITY',
  ])
  t.same(refused(sale.replace('"currency":"GBP"', '"currency":"GBP","Currency":"JPY"')), [
    '$.instruction.value.Currency',
  ])
  t.same(refused('{"channel":"moto","chann\\u0065L":2}'), ['$.channeL'], 'a name spelt with an escape')
  t.same(refused('{"\u212Aey":1,"customer":{"rıskProfile":1}}'), ["$.customer['rıskProfile']"], 'the dotless i')
  t.same(refused('{"merchant":{"entity":"a","ENTİTY":"b"}}'), ["$.merchant['ENTİTY']"], 'the dotted capital I')
  t.same(refused('{"ſcheme":1}'), undefined, 'a top-level name the schema gives only inside instruction')
  t.same(refused('{"instruction":{"ſcheme":{"reference":1,"Reference":2}}}'), ["$.instruction['ſcheme']"])
  t.same(refused('{"instruction":{"scheme":{"reference":1,"Reference":2}}}'), ['$.instruction.scheme.Reference'])
  t.same(refused('{"Customer":{}}', REQUEST_NAMES.recurring), ['$.Customer'], 'a member named only to refuse it')
  t.same(
    refused('{"instruction":{"paymentInstrument":{"type":"card/token","href":"x","CardNumber":"1"}}}'),
    ['$.instruction.paymentInstrument.CardNumber'],
    'the names of every variant of a union, whichever the type',
  )
})

t.test('a sibling in a compatibility form of a named member (NFKC) is refused, as paths fold', async (t) => {
  t.same(refused('{"instruction":{},"in\ufb06ruction":{"value":{"currency":"JPY"}}}'), ["$['in\ufb06ruction']"])
  t.same(refused('{"customer":{},"cu\ufb05omer":{"riskProfile":1}}'), ["$['cu\ufb05omer']"], 'the long s t ligature')
  t.same(refused('{"customer":{"riskProfile":1,"riskPro\ufb01le":2}}'), ["$.customer['riskPro\ufb01le']"])
  t.same(refused('{"merchant":{"entity":"a","\uff45ntity":"b"}}'), ["$.merchant['\uff45ntity']"], 'full width')
  t.same(
    refused('{"merchant":{"entity":"a","\u{1d41e}ntity":"b"}}'),
    ["$.merchant['\u{1d41e}ntity']"],
    'outside the BMP',
  )
  t.same(
    refused('{"instruction":{"paymentInstrument":{"billingAddress":{},"billingAddre\u1e9e":{}}}}'),
    ["$.instruction.paymentInstrument['billingAddre\u1e9e']"],
    'the capital sharp s, which casefold takes to ss',
  )
  t.equal(refused('{"merchant":{"entity":"a","\u00e9ntity":"b"}}'), undefined, 'a name no reading folds into one')
})

/** Every member the schema names, with the path of the object that holds it, for both operations. */
function namedMembers(names: Names, path: readonly string[] = []): { path: readonly string[]; name: string }[] {
  return [...names.members].flatMap(([name, below]) => [
    { path, name },
    ...(below === null ? [] : namedMembers(below, [...path, name])),
  ])
}
const NAMED = OPERATIONS.flatMap((operation) =>
  namedMembers(REQUEST_NAMES[operation]).map((member) => ({ operation, ...member })),
)

/** Whether a body holding the named member and `sibling` beside it has the sibling refused at its path. */
function siblingRefused(member: (typeof NAMED)[number], sibling: string): boolean {
  let text = `{${JSON.stringify(member.name)}:1,${JSON.stringify(sibling)}:2}`
  for (const parent of [...member.path].reverse()) text = `{${JSON.stringify(parent)}:${text}}`
  const at = appendKey(member.path.reduce(appendKey, '$'), sibling)
  const items = check(text, REQUEST_NAMES[member.operation])?.body.validationErrors ?? []
  return items.some((item) => item.errorName === 'fieldIsNotAllowed' && item.jsonPath === at)
}

t.test("every character a lenient backend folds into a named member's letters is refused there", async (t) => {
  // The oracle is the model of test/helpers/lenient.ts, written apart from lib/: each of its characters in turn.
  const missed: string[] = []
  let tried = 0
  for (const [letters, characters] of FOLDS_INTO) {
    const member = NAMED.find(({ name }) => name.toLowerCase().includes(letters))
    if (member === undefined) continue
    const at = member.name.toLowerCase().indexOf(letters)
    for (const character of characters) {
      tried++
      const sibling = member.name.slice(0, at) + character + member.name.slice(at + letters.length)
      if (!siblingRefused(member, sibling)) missed.push(sibling)
    }
  }
  t.ok(tried > 800, `${tried} spellings`)
  t.same(missed, [])
})

t.test('property: a sibling that any lenient reading takes for a named member is refused', async (t) => {
  fc.assert(
    fc.property(
      fc.constantFrom(...NAMED),
      fc.array(fc.oneof(fc.constant(0), fc.constant(1), fc.integer({ min: 2, max: 10_000 })), {
        minLength: 1,
        maxLength: 24,
      }),
      (member, choices) => {
        const sibling = respell(member.name, choices)
        const readAsIt = [FOLDINGS.case, FOLDINGS.compatibility].some((fold) => fold(sibling) === fold(member.name))
        return !readAsIt || siblingRefused(member, sibling)
      },
    ),
    runs(),
  )
})

t.test('a named member repeated is refused at its path, however its name is written', async (t) => {
  t.same(refused(sale.replace('"entity":"default"', '"entity":"marketplace","entity":"default"')), [
    '$.merchant.entity',
  ])
  t.same(refused(sale.replace('"entity":"default"', '"entity":"marketplace", "\\u0065ntity" :"default"')), [
    '$.merchant.entity',
  ])
  t.same(refused(`{"merchant":{"entity":"a"},"merchant":{"entity":"b","Entity":"c"}}`), [
    '$.merchant',
    '$.merchant.Entity',
  ])
  t.same(refused('{"a":"\\"b\\":","b":1,"b":2}'), undefined, 'keys are told from strings that hold a quote and a colon')
  t.same(
    refused('{"a":"\\\\","transactionReference":1 , "transactionReference":[true,false,null,{"x":1}]}'),
    ['$.transactionReference'],
    'an escaped backslash ends a string',
  )
  t.same(refused('{ "value" : [ ] , "x" : { } , "channel" : 1e5 , "channel" : -0.5 }'), ['$.channel'])
  for (const white of [' ', '\n', '\r', '\t'])
    t.same(
      refused(`{"channel":1,"channel"${white}:2}`),
      ['$.channel'],
      `JSON white space (U+${white.charCodeAt(0).toString(16).padStart(4, '0')}) before a colon`,
    )
  t.same(
    refused('{"merchant":[{"Entity":1}],"merchant":[]}'),
    ['$.merchant'],
    'a named object that is an array holds no member',
  )
  t.same(
    refused('{"x":"\\"a","channel":1,"channel":2}'),
    ['$.channel'],
    'a string holding an escaped quote before its last character',
  )
  t.same(
    refused('{"channel":1,"channel":2,"instruction":{"paymentInstrument":{"billingAddress":{"city":"a","city":"b"}}}}'),
    ['$.channel'],
    'an open object read again is left alone',
  )
})

t.test('each refusal says what is wrong', async (t) => {
  const items = (text: string) =>
    check(text)?.body.validationErrors?.map(({ jsonPath, message }) => ({ jsonPath, message }))
  t.same(items('{"channel":1,"Channel":2}'), [
    {
      jsonPath: '$.Channel',
      message: 'Only the spelling the schema gives this member is allowed, not another letter case of it.',
    },
  ])
  t.same(items('{"channel":1,"channel":2}'), [
    { jsonPath: '$.channel', message: 'A member the schema names must appear once.' },
  ])
})

/** Where a duplicate was written: its path, and whether the schema names it there. */
interface Repeat {
  path: string
  named: boolean
}

/**
 * A JSON text of `value`, written apart from lib/: members in an order `order` gives, `white` between
 * tokens, keys \u-escaped whole when `escape` says, and the member written `repeatAt`-th (counted from
 * 0 in writing order) written twice, the same both times, which `repeat` then tells.
 */
function writeJson(
  value: unknown,
  options: { white: readonly string[]; order: number; escape: boolean; repeatAt: number },
): { text: string; repeat: Repeat | undefined } {
  let members = 0
  let tokens = 0
  let repeat: Repeat | undefined
  const white = () => options.white[tokens++ % options.white.length] as string
  const key = (name: string) =>
    options.escape
      ? `"${[...name].map((c) => [...c].map((u) => '\\u' + u.charCodeAt(0).toString(16).padStart(4, '0')).join('')).join('')}"`
      : JSON.stringify(name)
  const rank = (name: string) =>
    [...name].reduce((hash, c) => (hash * 31 + (c.codePointAt(0) as number)) % 9973, options.order)
  const write = (node: unknown, path: string, names: Names | null): string => {
    if (Array.isArray(node)) return `[${node.map((item) => white() + write(item, path, null) + white()).join(',')}]`
    if (node === null || typeof node !== 'object') return JSON.stringify(node)
    const names_ = Object.keys(node).sort((a, b) => rank(a) - rank(b))
    const parts = names_.map((name) => {
      const below = names?.members.get(name)
      const member = `${white()}${key(name)}${white()}:${white()}${write((node as Record<string, unknown>)[name], appendKey(path, name), below ?? null)}${white()}`
      if (members++ !== options.repeatAt) return member
      repeat = { path: appendKey(path, name), named: below !== undefined }
      return `${member},${member}`
    })
    return `{${parts.join(',')}}`
  }
  return { text: white() + write(value, '$', REQUEST_NAMES.sale) + white(), repeat }
}

/** The objects of a sale along the named paths: where members the schema does not name may be added. */
const OBJECT_PATHS = ((): string[][] => {
  const paths: string[][] = []
  const walk = (node: unknown, path: string[], names: Names | null) => {
    if (names === null || node === null || typeof node !== 'object' || Array.isArray(node)) return
    paths.push(path)
    for (const [name, below] of names.members) walk((node as Record<string, unknown>)[name], [...path, name], below)
  }
  walk(saleBody(), [], REQUEST_NAMES.sale)
  return paths
})()

const documents = fc.record({
  extras: fc.array(fc.tuple(fc.constantFrom(...OBJECT_PATHS), fc.nat(99), fc.jsonValue({ maxDepth: 3 })), {
    maxLength: 4,
  }),
  white: fc.array(fc.constantFrom('', ' ', '\n', '\r', '\t', ' \n\t'), { minLength: 1, maxLength: 6 }),
  order: fc.nat(9972),
  escape: fc.boolean(),
  repeatAt: fc.nat(80),
})

/** A sale with the extras added: each under a name (`x` and a number) that folds into no named member. */
function saleWith(extras: readonly (readonly [string[], number, unknown])[]): unknown {
  const body = saleBody() as Record<string, unknown>
  for (const [path, number, value] of extras) {
    const holder = path.reduce((node, name) => node[name] as Record<string, unknown>, body)
    holder[`x${number}`] = value
  }
  return body
}

t.test('property: the screen passes a body written once in any order, spacing or escapes, and no repeat', async (t) => {
  // The oracle is the writer above: it knows whether, and which, member it wrote twice.
  fc.assert(
    fc.property(documents, ({ extras, ...options }) => {
      const { text, repeat } = writeJson(saleWith(extras), options)
      const bytes = Buffer.from(text)
      const document: unknown = JSON.parse(text)
      const members = membersIn(document, REQUEST_NAMES.sale, false, MAX_DEPTH)
      if (spelledOnce(text, bytes, members) !== (repeat === undefined)) return false
      const paths = checkSpelling(text, bytes, REQUEST_NAMES.sale, members)?.body.validationErrors?.map(
        (item) => item.jsonPath,
      )
      return repeat?.named === true ? paths?.length === 1 && paths[0] === repeat.path : paths === undefined
    }),
    runs(),
  )
})

t.test('the screen sends a folded sibling on to be read, at any depth the schema names', async (t) => {
  t.equal(once(sale), true)
  for (const text of [
    sale.replace('{', '{"Merchant":1,'),
    sale.replace('"entity":"default"', '"entity":"default","ENTITY":"x"'),
    sale.replace('"currency":"GBP"', '"currency":"GBP","Currency":"JPY"'),
  ])
    t.equal(once(text), false, text.slice(0, 40))
  const listed = '{"extra":[{"Merchant":1}],"list":[[{"a":1}]]}'
  t.equal(once(listed), true, 'arrays hold no table')
})

t.test('a colon inside a string is no key: the screen counts the keys then, and still finds a repeat', async (t) => {
  const colons = [
    sale.replace('"line1":"', '"line1":"12:30, '),
    sale.replace('"line1":"', '"line1":"12\\u003a30 '),
    sale.replace('{', '{"x:1":{"y:":":"},'),
  ]
  t.equal(new Set([sale, ...colons]).size, 4, 'each text differs from the sale')
  for (const text of colons) t.equal(once(text), true, text)
  // A repeat as well as a colon in a string: the colons and the keys both outnumber the members.
  for (const text of [
    sale.replace('"entity":"default"', '"entity":"default:1","entity":"default"'),
    sale.replace('"currency":"GBP"', '"currency":"G:P","currency":"GBP"'),
  ]) {
    t.equal(once(text), false, text)
    t.not(check(text), undefined, text)
  }
})
