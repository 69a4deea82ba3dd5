"""What the tests share: builders of drafters, targets and files (factory, safetensors_readers), a local Hub server
(fakehub), the reference decoding loop, and the constants and helpers of the engine, browser, registry and Hub
tiers. Test modules import from here and from conftest, never from one another."""
