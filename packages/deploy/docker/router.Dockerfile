# The router: LiteLLM's proxy at the version the tests run (router/requirements.txt), on the
# config of router/litellm.yaml. From the repository root:
#   docker build -f packages/deploy/docker/router.Dockerfile -t vllm-factory-router .
FROM python:3.11-slim
COPY packages/deploy/router/requirements.txt /router/requirements.txt
RUN pip install --no-cache-dir -r /router/requirements.txt
COPY packages/deploy/router/litellm.yaml /router/litellm.yaml
EXPOSE 4000
CMD ["litellm", "--config", "/router/litellm.yaml", "--host", "0.0.0.0", "--port", "4000"]
