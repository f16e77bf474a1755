import t from 'tap'
import { LINE1_MAX_LENGTH, replaceUnsupported } from '../lib/narrative.js'

t.test('supported characters pass unchanged', async (t) => {
  const text = 'Mind Palace Ltd, No. 7-B'
  t.equal(replaceUnsupported(text), text)
  t.equal(replaceUnsupported(''), '')
})

t.test('every unsupported code point becomes one space', async (t) => {
  t.equal(replaceUnsupported('Café & Co!'), 'Caf    Co ')
  t.equal(replaceUnsupported('Shop😀'), 'Shop ', 'an emoji (two UTF-16 units) is one character')
  t.equal(replaceUnsupported('a\u0301'), 'a ', 'a combining mark is its own code point')
  t.equal(replaceUnsupported('tab\there_/'), 'tab here  ')
  t.equal(replaceUnsupported('\ud800x'), ' x', 'a lone surrogate is one code point')
})

t.test('the statement line limit is 24', async (t) => {
  t.equal(LINE1_MAX_LENGTH, 24)
})

t.test('every printable ASCII character: only letters, digits, space, - . , survive', async (t) => {
  const kept = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 -.,'
  let all = ''
  let expected = ''
  for (let code = 0x20; code <= 0x7e; code++) {
    const character = String.fromCharCode(code)
    const outcome = kept.includes(character) ? character : ' '
    all += character
    expected += outcome
    t.equal(replaceUnsupported(character), outcome, `${JSON.stringify(character)} alone`)
    // An unsupported character first, so that the character-by-character path decides too.
    t.equal(replaceUnsupported(`\u00e9${character}`), ` ${outcome}`, `${JSON.stringify(character)} after an é`)
  }
  t.equal(all.length, 95)
  t.equal(expected.replaceAll(' ', '').length, kept.length - 1, 'each kept character is printable ASCII')
  t.equal(replaceUnsupported(all), expected)
})
