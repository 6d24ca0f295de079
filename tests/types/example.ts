// The README's embedding example, type-checked against www/lib/inferno.d.ts by `tsc --noEmit`
// (./build.sh test). Uses every part of the public API once.
import { Inferno, InfernoError, MessageBuilder, type ModelInfo, type Tool } from '../../www/lib/inferno.js';

export async function demo(file: File, output: HTMLElement): Promise<void> {
  const engine = await Inferno.load(file, {
    threads: Inferno.capabilities().defaultThreads,
    onProgress: ({ phase, loaded, total }) => console.log(phase, loaded / total),
  });
  const model: ModelInfo | null = engine.model;
  console.log(model?.architecture, model?.context_length, model?.recommended_sampling.temperature);

  const controller = new AbortController();
  const stream = await engine.chat.completions.create({
    messages: [{ role: 'user', content: 'Write a haiku about embers.' }],
    stream: true,
    max_tokens: 64,
    temperature: 0.7,
    logprobs: true,
    top_logprobs: 3,
    stop: ['\n\n'],
    signal: controller.signal,
  });
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    output.textContent += choice.delta.content ?? '';
    const step = chunk.inferno?.step;
    if (step?.trace)
      console.log(
        step.piece,
        step.trace.nucleus_size,
        step.trace.entropy_bits,
        choice.logprobs?.content[0].top_logprobs,
      );
    if (choice.finish_reason)
      console.log(choice.finish_reason, chunk.usage?.completion_tokens, chunk.inferno?.stats?.decodeTokS);
  }

  // Regenerate from the third token with the runner-up candidate forced there.
  const branched = await engine.branch({ step: 2, token: 42, max_tokens: 64 });
  if (branched.object === 'chat.completion')
    console.log(branched.choices[0].message.content, branched.inferno.steps.length);

  // A tool call, streamed, joined, answered and answered on.
  const weather: Tool = {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' } } },
    },
  };
  const question = { role: 'user' as const, content: 'Weather in Oslo?' };
  const message = new MessageBuilder();
  for await (const chunk of await engine.chat.completions.create({
    messages: [question],
    tools: [weather],
    tool_choice: 'required',
    stream: true,
  }))
    message.add(chunk.choices[0].delta);
  const call = message.message().tool_calls?.[0];
  if (call) {
    const next = await engine.chat.completions.create({
      messages: [
        question,
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: '{"celsius": 4}' },
      ],
      tools: [weather],
    });
    console.log(
      next.choices[0].message.content,
      next.choices[0].message.reasoning_content,
      next.choices[0].finish_reason,
    );
  }

  // A plain completion: the prompt as it is.
  const completion = await engine.completions.create({
    prompt: 'Once upon a time',
    max_tokens: 16,
    logprobs: 2,
  });
  console.log(completion.choices[0].text, completion.choices[0].logprobs?.token_logprobs);

  const embedded = await engine.embeddings.create({ input: ['a cat', 'a dog'], dimensions: 64 });
  const first: number[] | string = embedded.data[0].embedding;
  console.log(first, embedded.usage.prompt_tokens, embedded.inferno.pooling, engine.model?.purpose);

  const ids: number[] = await engine.tokenize('Hello', { addSpecial: false });
  const text: string = await engine.detokenize(ids);
  const { report } = await engine.inspect();
  console.log(text, Object.keys(report), (await engine.engineInfo()).defaults.sampling.top_k);

  try {
    await engine.chat.completions.create({ messages: [], stream: false });
  } catch (error) {
    if (error instanceof InfernoError) console.log(error.kind, error.message);
  }
  for (const stored of await Inferno.storedModels.list()) console.log(stored.name, stored.size);
  await engine.unload();
  engine.terminate();
}
