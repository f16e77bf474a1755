import t from 'tap'
import { basicToken, parseToken } from '../../lib/credentials/basic.js'
import { basic } from '../helpers/fixtures.js'

function parseBasic(header: string): { username: string; password: string } | undefined {
  const token = basicToken(header)
  return token === undefined ? undefined : parseToken(token)
}

t.test('basicToken gives one spelling of the credentials, whatever the scheme case and spaces', async (t) => {
  const token = basic('shop-1', 's3cret').slice(6)
  for (const header of [`Basic ${token}`, `basic ${token}`, `BASIC    ${token}`, `bAsIc ${token}   `])
    t.equal(basicToken(header), token, JSON.stringify(header))
  t.equal(basicToken(`Bearer ${token}`), undefined)
})

t.test('parseToken follows RFC 7617', async (t) => {
  t.same(parseBasic(basic('shop-1', 's3cret')), { username: 'shop-1', password: 's3cret' })
  t.same(
    parseBasic(`bAsIc   ${basic('a', 'b').slice(6)}`),
    { username: 'a', password: 'b' },
    'scheme is case-insensitive',
  )
  t.same(parseBasic(basic('a', 'p:w:d')), { username: 'a', password: 'p:w:d' }, 'the first colon splits')
  t.same(parseBasic(basic('zoë', 'pässword')), { username: 'zoë', password: 'pässword' }, 'UTF-8')
  t.same(parseBasic(basic('a', '')), { username: 'a', password: '' })
  const refused = [
    '',
    'Basic',
    'Basic ',
    `Bearer ${basic('a', 'b').slice(6)}`,
    `Basic${basic('a', 'b').slice(6)}`,
    `Basic ${Buffer.from('no-colon').toString('base64')}`,
    basic('', 'pw'),
    basic('a\u0000', 'pw'),
    basic('a', 'p\nw'),
    `Basic ${Buffer.from([0x61, 0x3a, 0xff]).toString('base64')}`,
    'Basic YTpiYw',
    'Basic YTpiYw=',
    'Basic !!!!',
    `Basic ${basic('a', 'b').slice(6)} extra`,
  ]
  for (const header of refused) t.equal(parseBasic(header), undefined, JSON.stringify(header))
})
