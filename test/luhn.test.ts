import t from 'tap'
import { luhnValid } from '../lib/luhn.js'

t.test('luhnValid accepts numbers whose mod-10 sum is zero', async (t) => {
  t.ok(luhnValid('4444333322221111'))
  t.ok(luhnValid('79927398713'))
  t.ok(luhnValid('5105105105105100'), 'zeros count')
  t.ok(luhnValid('0'))
  t.notOk(luhnValid('4444333322221112'))
  t.notOk(luhnValid('79927398710'))
})

t.test('luhnValid refuses what is not a string of digits', async (t) => {
  t.notOk(luhnValid(''))
  t.notOk(luhnValid('4444 3333 2222 1111'))
  t.notOk(luhnValid('44443333222211a1'))
  // Characters whose code, read as a digit, would keep the sum a multiple of 10: ';' counts 11, "'" counts -9,
  // where the 1 they replace counts 1. Only the digit check refuses them.
  t.notOk(luhnValid('444433332222111;'))
  t.notOk(luhnValid("444433332222111'"))
})
