"""The descriptor pool of the generated modules: theirs alone, not protobuf's default pool."""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
