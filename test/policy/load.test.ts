import t from 'tap'
import { join } from 'node:path'
import { entityOfFile, loadPolicyDir, loadPolicyFile } from '../../lib/policy/load.js'
import { policyJson } from '../helpers/fixtures.js'

t.test('entityOfFile is the name without .json', async (t) => {
  t.equal(entityOfFile('/etc/policies/shop-1.json'), 'shop-1')
})

t.test('loadPolicyFile: the policy, or the file and why it is refused', async (t) => {
  const dir = t.testdir({
    'a.json': policyJson('a'),
    'b.json': policyJson('not-b'),
    'c.json': '{"entity": "c",',
    'd.json': policyJson('d', { currencies: ['eur'] }),
    'e.json': { 'x.json': 'a folder, not a file' },
    'f.json': policyJson('f').replace('{', '{"currencies": ["JPY"], '),
  })
  t.match(await loadPolicyFile(join(dir, 'a.json')), { entity: 'a' })
  t.match(await loadPolicyFile(join(dir, 'b.json')), {
    file: join(dir, 'b.json'),
    reason: '$.entity: must be "b", the file\'s name',
  })
  t.match(await loadPolicyFile(join(dir, 'c.json')), { file: join(dir, 'c.json'), reason: /^not JSON: / })
  t.match(await loadPolicyFile(join(dir, 'd.json')), { file: join(dir, 'd.json'), reason: /^\$\.currencies\[0\]: / })
  t.match(await loadPolicyFile(join(dir, 'e.json')), {
    file: join(dir, 'e.json'),
    reason: 'a folder, where a file is expected',
  })
  // Red before: valid, with the currencies of the second list, which a reader of the file does not see.
  t.match(await loadPolicyFile(join(dir, 'f.json')), {
    file: join(dir, 'f.json'),
    reason:
      '$.currencies: given twice in one object, where the gateway would read the last and a reader of the file the first; give it once',
  })
  t.match(await loadPolicyFile(join(dir, 'gone.json')), {
    file: join(dir, 'gone.json'),
    reason: 'no such file or folder',
  })
})

t.test('loadPolicyDir: every *.json file, sorted, the good ones and the problems', async (t) => {
  const dir = t.testdir({
    'b.json': policyJson('b'),
    'a.json': policyJson('a'),
    'z.json': '[]',
    'notes.md': '# not a policy',
  })
  const { policies, problems } = await loadPolicyDir(dir)
  t.same([...policies.keys()], ['a', 'b'])
  t.equal(problems.length, 1)
  t.equal(problems[0]?.file, join(dir, 'z.json'))
  await t.rejects(loadPolicyDir(join(dir, 'missing')), { code: 'ENOENT' })
})

t.test('the sample policies in policies/ all load', async (t) => {
  const { policies, problems } = await loadPolicyDir('policies')
  t.same(problems, [])
  t.same([...policies.keys()], ['collections', 'default', 'eu-tokens', 'marketplace'])
  t.equal(policies.get('marketplace')?.features.paymentFacilitator, true)
  t.equal(policies.get('marketplace')?.line1, 'reject')
  t.same([...(policies.get('eu-tokens')?.currencies ?? [])], ['EUR'])
})
