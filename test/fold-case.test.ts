import t from 'tap'
import { foldCase } from '../lib/fold-case.js'
import { FOLDS_INTO } from './helpers/lenient.js'

t.test('letters fold as a backend that folds case beyond ASCII folds them', async (t) => {
  t.equal(foldCase('SaLeS'), 'sales')
  t.equal(foldCase('\u017fales'), 'sales', 'long s')
  t.equal(foldCase('m\u0131grate'), 'migrate', 'dotless i')
  t.equal(foldCase('M\u0130GRATE'), 'migrate', 'dotted capital I')
  t.equal(foldCase('\u212aelvin'), 'kelvin', 'Kelvin sign')
  t.equal(foldCase('On\ufb01le'), 'onfile', 'fi ligature')
  t.equal(foldCase('\uff53ales'), 'sales', 'full-width s')
  t.equal(foldCase('in\ufb06ruction'), 'instruction', 'st ligature')
  t.equal(foldCase('cu\ufb05omer'), 'customer', 'long s t ligature')
  t.equal(foldCase('billingAddre\u1e9e'), 'billingaddress', 'capital sharp s, as casefold takes it to ss')
  t.equal(foldCase('Stra\u00dfe'), 'strasse', 'sharp s')
  t.equal(foldCase('\u{1d41e}ntity'), 'entity', 'mathematical bold e, outside the BMP')
  t.equal(foldCase('\u00e9ntity'), '\u00e9ntity', 'a letter that folds to no ASCII letter stays itself')
})

t.test('every character a lenient backend folds into ASCII letters folds into them here', async (t) => {
  // The model of test/helpers/lenient.ts (Go's and .NET's case folding, Python's NFKC and casefold), written apart from lib/.
  const missed: string[] = []
  let seen = 0
  for (const [letters, characters] of FOLDS_INTO) {
    for (const character of characters) {
      seen++
      if (foldCase(character) !== letters) missed.push(`U+${character.codePointAt(0)?.toString(16)} -> ${letters}`)
    }
  }
  t.ok(seen > 1000, `${seen} characters`)
  t.same(missed, [])
})
