import t from 'tap'
import { maskCardNumbers, maskPan } from '../lib/card-mask.js'

t.test('maskPan keeps at most the first six and last four digits', async (t) => {
  t.equal(maskPan('4444333322221111'), '444433******1111')
  t.equal(maskPan('1234567890'), '**********')
})

t.test('maskCardNumbers keeps at most the first six and last four digits of any 12-19 digit run', async (t) => {
  t.equal(maskCardNumbers('pan 4444333322221111 end'), 'pan 444433******1111 end')
  t.equal(maskCardNumbers('/p?card=4444-3333-2222-1111'), '/p?card=444433******1111')
  t.equal(maskCardNumbers('4444 3333 2222 1111'), '444433******1111')
  t.equal(maskCardNumbers('a 12345678901 b'), 'a 12345678901 b', 'eleven digits are not a card number')
  t.equal(maskCardNumbers('12345678901234567890'), '12345678901234567890', 'twenty digits are not one either')
  t.equal(maskCardNumbers('123456789012'), '123456**9012')
})
