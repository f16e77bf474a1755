import fc from 'fast-check'
import t from 'tap'
import { checkSpelling } from '../../lib/checks/spelling.js'
import { appendKey } from '../../lib/schema/json-path.js'
import { REQUEST_NAMES, type Names } from '../../lib/schema/names.js'
import { OPERATIONS } from '../../lib/schema/payment.js'
import { saleBody } from '../helpers/fixtures.js'
import { runs } from '../helpers/fuzz.js'
import { FOLDINGS, FOLDS_INTO, respell } from '../helpers/lenient.js'

const check = (text: string, names = REQUEST_NAMES.sale) =>
  checkSpelling(text, Buffer.from(text), JSON.parse(text), names)
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
})
