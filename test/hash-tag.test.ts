import t from 'tap'
import { hashTag } from '../lib/hash-tag.js'

t.test(
  'hashTag: the whole text as one Redis Cluster hash tag, with no brace inside, and no two texts alike',
  async (t) => {
    t.equal(hashTag('["default","order-1"]'), '{["default","order-1"]}')
    t.equal(hashTag('a{b}c%d'), '{a%7Bb%7Dc%25d}')
    const texts = ['{', '%7B', '}', '%7D', '%', '%25', '{}', '']
    const tags = texts.map(hashTag)
    t.equal(new Set(tags).size, texts.length, 'percent-encoding is one to one')
    for (const tag of tags) t.notMatch(tag.slice(1, -1), /[{}]/, `${tag}: no brace inside`)
  },
)
