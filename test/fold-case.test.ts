import t from 'tap'
import { foldCase } from '../lib/fold-case.js'

t.test('letters fold as a backend that folds case beyond ASCII folds them', async (t) => {
  t.equal(foldCase('SaLeS'), 'sales')
  t.equal(foldCase('\u017fales'), 'sales', 'long s')
  t.equal(foldCase('m\u0131grate'), 'migrate', 'dotless i')
  t.equal(foldCase('M\u0130GRATE'), 'migrate', 'dotted capital I')
  t.equal(foldCase('\u212aelvin'), 'kelvin', 'Kelvin sign')
  t.equal(foldCase('On\ufb01le'), 'onfile', 'fi ligature')
  t.equal(foldCase('\uff53ales'), 'sales', 'full-width s')
  // Every code point whose folding gives ASCII letters folds to them here (Python's casefold, Go's EqualFold).
  for (let code = 0x80; code <= 0xffff; code++) {
    const char = String.fromCodePoint(code)
    const upper = char.toUpperCase()
    if (/^[A-Za-z]+$/.test(upper) || /^[A-Za-z]+$/.test(char.toLowerCase()))
      t.ok(/^[a-z]+$/.test(foldCase(char)), `U+${code.toString(16)} folds to ASCII`)
  }
})
