# Feasibility: cuBLAS DGEMM (FP64 tensor cores) against SGEMM (strict float32) at the MLP's and GPT's shapes.
import torch, json, sys
torch.backends.cuda.matmul.allow_tf32 = False
shapes = [(512,512,784),(512,256,512),(512,784,512),(512,512,256),(256,512,512),(64,512,784),(4096,4096,4096),
          (16384,1152,384),(16384,1536,384),(384,1536,16384),(16384,384,1536)]
def t(fn, reps=200):
    for _ in range(20): fn()
    torch.cuda.synchronize()
    s=[torch.cuda.Event(enable_timing=True) for _ in range(reps)]; e=[torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        s[i].record(); fn(); e[i].record()
    torch.cuda.synchronize()
    ts=sorted(a.elapsed_time(b) for a,b in zip(s,e)); return ts[len(ts)//2]*1e3
print(torch.cuda.get_device_name())
for (m,n,k) in shapes:
    r={}
    for dt in (torch.float32, torch.float64):
        a=torch.randn(m,k,device='cuda',dtype=dt); b=torch.randn(k,n,device='cuda',dtype=dt); c=torch.empty(m,n,device='cuda',dtype=dt)
        reps = 50 if m*n*k > 1e10 else 300
        r[str(dt)] = t(lambda: torch.mm(a,b,out=c), reps)
    f=2*m*n*k
    print(f"{m}x{n}x{k}: fp32 {r['torch.float32']:.2f} us ({f/r['torch.float32']/1e6:.1f} TF/s)  fp64 {r['torch.float64']:.2f} us ({f/r['torch.float64']/1e6:.1f} TF/s)", flush=True)
