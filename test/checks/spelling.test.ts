import t from 'tap'
import { checkSpelling, hasFoldedSibling } from '../../lib/checks/spelling.js'
import { REQUEST_NAMES } from '../../lib/schema/names.js'
import { saleBody } from '../helpers/fixtures.js'

const check = (text: string, names = REQUEST_NAMES.sale) => checkSpelling(text, JSON.parse(text), names)
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
  t.same(
    refused('{"merchant":[{"Entity":1}],"merchant":[]}'),
    ['$.merchant'],
    'a named object that is an array holds no member',
  )
})

t.test('hasFoldedSibling reads a document alone', async (t) => {
  t.equal(hasFoldedSibling(undefined, REQUEST_NAMES.sale), false)
  t.equal(hasFoldedSibling({ merchant: { entity: 'a' } }, REQUEST_NAMES.sale), false)
  t.equal(hasFoldedSibling({ merchant: { entity: 'a', ENTİTY: 'b' } }, REQUEST_NAMES.sale), true)
})
